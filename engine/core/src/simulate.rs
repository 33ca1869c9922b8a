//! A time-stepping simulation of the broker without a cluster: evaluate, apply what was
//! desired to the world as the broker would, let the test change the world and the clock,
//! evaluate again. Deterministic: the world is in memory, the clock is given.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value};

use crate::model::{DeletionPolicy, OutputMode};
use crate::names::{ANNOTATION_CREATED, ANNOTATION_RULE, LABEL_MANAGED_BY, LABEL_PACK};
use crate::object::{MemoryWorld, ObjectKey, World};
use crate::pack::Pack;
use crate::plan::{Plan, plan};

/// The world, the clock and what the pack last desired.
pub struct Simulation<'p> {
    pack: &'p Pack,
    pub world: MemoryWorld,
    pub now: DateTime<Utc>,
    /// Patches applied so far, by target: taken back when no longer desired.
    patches: BTreeMap<ObjectKey, Value>,
    last: Option<Plan>,
}

impl<'p> Simulation<'p> {
    pub fn new(pack: &'p Pack, world: MemoryWorld, now: DateTime<Utc>) -> Self {
        Simulation {
            pack,
            world,
            now,
            patches: BTreeMap::new(),
            last: None,
        }
    }

    /// Evaluates every trigger of the world at the current clock.
    pub fn evaluate(&mut self) -> &Plan {
        self.last.insert(plan(self.pack, &self.world, self.now))
    }

    /// The last evaluation's plan.
    pub fn last(&self) -> Option<&Plan> {
        self.last.as_ref()
    }

    pub fn advance(&mut self, by: TimeDelta) {
        self.now += by;
    }

    /// Applies the last evaluation to the world, as the broker would: outputs created or
    /// replaced (their `status` stays, it is another controller's), patches merged into
    /// their targets and taken back when no longer desired, status written onto the
    /// triggers, and the pack's objects that nothing desires removed, or orphaned (the pack's
    /// labels and creation mark taken off) when the rule that made them says `deletion:
    /// Orphan`. Like the broker, it removes nothing while some trigger fails to evaluate.
    pub fn settle(&mut self) {
        let Some(last) = self.last.take() else {
            return;
        };
        let desired: BTreeSet<&ObjectKey> = last.objects.iter().map(|d| &d.key).collect();
        let mut patches = BTreeMap::new();
        for d in &last.objects {
            let existing = get(&self.world, &d.key);
            let object = match d.mode {
                OutputMode::Create if existing.is_some() => continue,
                OutputMode::Apply | OutputMode::Create => {
                    // The status another controller writes stays; a rendered status is
                    // applied over it, as the broker applies it to the status subresource.
                    let mut object = d.object.clone();
                    if let (Some(status), Value::Object(fields)) =
                        (existing.as_ref().and_then(|e| e.get("status")), &mut object)
                    {
                        let mut kept = status.clone();
                        if let Some(rendered) = fields.get("status") {
                            merge(&mut kept, rendered);
                        }
                        fields.insert("status".into(), kept);
                    }
                    object
                }
                OutputMode::Patch => {
                    let Some(mut target) = existing else {
                        continue;
                    };
                    // As server-side apply does: fields the last patch set and this one
                    // does not are removed.
                    if let Some(previous) = self.patches.get(&d.key) {
                        take_back(&mut target, previous);
                    }
                    merge(&mut target, &d.object);
                    patches.insert(d.key.clone(), d.object.clone());
                    target
                }
            };
            let _ = self.world.insert(&d.key.cluster, object);
        }
        for (key, patch) in std::mem::take(&mut self.patches) {
            if patches.contains_key(&key) {
                continue;
            }
            if let Some(mut target) = get(&self.world, &key) {
                take_back(&mut target, &patch);
                let _ = self.world.insert(&key.cluster, target);
            }
        }
        self.patches = patches;
        for outcome in &last.outcomes {
            let Some(status) = &outcome.status else {
                continue;
            };
            if let Some(mut trigger) = get(&self.world, &outcome.trigger)
                && let Value::Object(fields) = &mut trigger
            {
                let merged = match fields.remove("status") {
                    Some(mut current) => {
                        merge(&mut current, status);
                        current
                    }
                    None => status.clone(),
                };
                fields.insert("status".into(), merged);
                let _ = self.world.insert(&outcome.trigger.cluster, trigger);
            }
        }
        let failing = last.outcomes.iter().any(|o| !o.errors.is_empty());
        if !failing {
            let undesired: Vec<ObjectKey> = self
                .world
                .iter()
                .filter(|(key, object)| {
                    !desired.contains(key)
                        && object
                            .pointer("/metadata/labels")
                            .and_then(|l| l.get(LABEL_PACK))
                            .and_then(Value::as_str)
                            == Some(self.pack.name())
                })
                .map(|(key, _)| key)
                .collect();
            let orphaning: BTreeSet<String> = self
                .pack
                .rule_kinds()
                .into_iter()
                .filter(|r| r.deletion == DeletionPolicy::Orphan)
                .map(|r| r.name)
                .collect();
            for key in undesired {
                match get(&self.world, &key) {
                    Some(mut object) if made_by_any(&object, &orphaning) => {
                        orphan(&mut object);
                        let _ = self.world.insert(&key.cluster, object);
                    }
                    _ => {
                        self.world.remove(&key);
                    }
                }
            }
        }
        self.last = Some(last);
    }
}

/// Is the object an output of one of `rules` (its `switchyard.dev/rule` annotation, a list of
/// `rule/output`)? The broker decides so which undesired objects it orphans.
fn made_by_any(object: &Value, rules: &BTreeSet<String>) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION_RULE))
        .and_then(Value::as_str)
        .is_some_and(|sources| {
            sources
                .split(',')
                .any(|s| rules.contains(s.split('/').next().unwrap_or_default()))
        })
}

/// What the broker's orphaning takes off an object: the pack's labels and its creation mark.
fn orphan(object: &mut Value) {
    for (field, key) in [
        ("labels", LABEL_PACK),
        ("labels", LABEL_MANAGED_BY),
        ("annotations", ANNOTATION_CREATED),
    ] {
        if let Some(map) = object
            .pointer_mut(&format!("/metadata/{field}"))
            .and_then(Value::as_object_mut)
        {
            map.remove(key);
        }
    }
}

fn get(world: &MemoryWorld, key: &ObjectKey) -> Option<Value> {
    world.get_key(key).map(|o| Value::clone(&o))
}

/// Merges `patch` into `target`: maps key by key, lists of strings as sets (as
/// `finalizers`), anything else replaced.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Array(target), Value::Array(patch)) if is_set(target) && is_set(patch) => {
            for entry in patch {
                if !target.contains(entry) {
                    target.push(entry.clone());
                }
            }
        }
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                match target.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value);
                    }
                    _ => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// A list of strings, merged as a set (`finalizers`) rather than replaced.
fn is_set(list: &[Value]) -> bool {
    list.iter().all(Value::is_string)
}

/// Removes the fields a patch set (its leaves), and maps it leaves empty; identity fields
/// stay.
fn take_back(target: &mut Value, patch: &Value) {
    fn remove(target: &mut Map<String, Value>, patch: &Map<String, Value>, depth: usize) {
        for (key, value) in patch {
            if depth == 0 && matches!(key.as_str(), "apiVersion" | "kind") {
                continue;
            }
            match (target.get_mut(key), value) {
                (Some(Value::Object(inner)), Value::Object(sub)) => {
                    remove(inner, sub, depth + 1);
                    if inner.is_empty() {
                        target.remove(key);
                    }
                }
                (Some(Value::Array(entries)), Value::Array(taken))
                    if is_set(entries) && is_set(taken) =>
                {
                    entries.retain(|e| !taken.contains(e));
                    if entries.is_empty() {
                        target.remove(key);
                    }
                }
                (Some(_), _) if !(depth == 1 && matches!(key.as_str(), "name" | "namespace")) => {
                    target.remove(key);
                }
                _ => {}
            }
        }
    }
    if let (Value::Object(target), Value::Object(patch)) = (target, patch) {
        remove(target, patch, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_taken_back_leaves_the_owners_fields() {
        let mut service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "dns", "namespace": "kube-system",
                         "annotations": {"owner": "tenant", "mesh/global": "true"}},
            "spec": {"ports": [53]}});
        let patch = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "dns", "namespace": "kube-system",
                         "annotations": {"mesh/global": "true"}}});
        take_back(&mut service, &patch);
        assert_eq!(
            service,
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "dns", "namespace": "kube-system",
                             "annotations": {"owner": "tenant"}},
                "spec": {"ports": [53]}})
        );
    }

    #[test]
    fn an_orphaned_output_loses_the_pack_s_labels_and_creation_mark_only() {
        let mut namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ns-1",
                         "labels": {"switchyard.dev/pack": "p", "app.kubernetes.io/managed-by": "switchyard",
                                    "tenant": "a"},
                         "annotations": {"switchyard.dev/created": "uid-1",
                                         "switchyard.dev/rule": "namespaces/namespace"}}});
        let rules: BTreeSet<String> = ["namespaces".to_string()].into();
        assert!(made_by_any(&namespace, &rules));
        assert!(!made_by_any(&namespace, &["other".to_string()].into()));
        orphan(&mut namespace);
        assert_eq!(
            namespace["metadata"],
            json!({"name": "ns-1", "labels": {"tenant": "a"},
                   "annotations": {"switchyard.dev/rule": "namespaces/namespace"}})
        );
    }

    #[test]
    fn merge_replaces_leaves_and_joins_maps() {
        let mut object = json!({"a": {"b": 1, "c": [1]}, "d": 1});
        merge(&mut object, &json!({"a": {"c": [2], "e": true}}));
        assert_eq!(object, json!({"a": {"b": 1, "c": [2], "e": true}, "d": 1}));
    }
}
