//! Making the clusters match the merged outputs: apply what is not up to date (a patch only
//! onto the object as it exists, and taken back when no trigger patches it any more), and
//! prune what no trigger desires when that is safe.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use switchyard_core::ObjectKey;
use switchyard_core::evaluate::{ANNOTATION_OWNERS, ANNOTATION_RULE, LABEL_PACK};
use switchyard_core::model::{DeletionPolicy, OutputMode};
use switchyard_core::object::World;
use switchyard_core::plan::OWNERS_MORE;

use super::state::{Applied, Controller, Initial, PackState, ReconcileError};
use crate::apply::ApplyError;
use crate::store::{KindKey, Store};

impl PackState {
    /// Objects in the caches that carry this pack's label and that no trigger desires: what
    /// prune may remove.
    pub(super) fn undesired(&self, store: &Store, pack_name: &str) -> Vec<(ObjectKey, Arc<Value>)> {
        let mut found = Vec::new();
        for kind in &self.output_kinds {
            let Some(cache) = store.cache(kind) else {
                continue;
            };
            for o in cache.list(None) {
                if !managed_by(&o, pack_name) {
                    continue;
                }
                if let Ok(key) = ObjectKey::of(&kind.cluster, &o)
                    && !self.by_output.contains_key(&key)
                {
                    found.push((key, o));
                }
            }
        }
        found
    }
}

impl Controller {
    /// Applies the merged form of each output that is still desired and not up to date.
    pub(super) async fn sync_outputs(
        &self,
        pack_name: &Arc<str>,
        keys: &BTreeSet<ObjectKey>,
    ) -> Result<(), ReconcileError> {
        let mut first_error = None;
        // Cluster-scoped outputs (Namespaces) first: the namespaced ones live in them.
        let ordered = keys
            .iter()
            .filter(|k| k.namespace.is_none())
            .chain(keys.iter().filter(|k| k.namespace.is_some()));
        for key in ordered {
            let (merged, record) = {
                let mut state = self.lock();
                let record = state.applied.get(key).cloned();
                let Some(p) = state.packs.get_mut(pack_name) else {
                    return Ok(());
                };
                (p.merged(key), record)
            };
            let Some(merged) = merged else {
                // Nobody desires it: prune decides, or, for a patch, it is taken back here.
                if let Err(e) = self.take_back_patch(pack_name, key).await {
                    first_error.get_or_insert(e);
                }
                continue;
            };
            let hash = merged.hash;
            let live = self.store.get_key(key);
            // A create-only output that exists is left as it is.
            if merged.desired.mode == OutputMode::Create && live.is_some() {
                continue;
            }
            if merged.desired.mode == OutputMode::Patch {
                if let Err(e) = self
                    .patch(pack_name, key, &merged.desired.object, live)
                    .await
                {
                    first_error.get_or_insert(e);
                }
                continue;
            }
            if let Some(live) = &live
                && up_to_date(
                    &merged.desired.object,
                    live,
                    hash,
                    record.as_ref(),
                    self.store.is_metadata_only(key),
                )
            {
                continue;
            }
            match self
                .clusters
                .apply(pack_name, key, &merged.desired.object)
                .await
            {
                Ok(stored) => {
                    self.count(|w| w.applies += 1);
                    let record = Applied {
                        hash,
                        generation: stored.metadata.generation,
                        resource_version: stored.metadata.resource_version.clone(),
                    };
                    self.lock().applied.insert(key.clone(), record);
                    tracing::debug!(object = %key, "applied");
                }
                Err(e) => {
                    tracing::warn!(object = %key, error = %e, "apply failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Applies a patch output: only onto the object as it exists (its uid is the apply's
    /// precondition, so a patch never creates the object nor lands on a successor of the same
    /// name), and only when some field differs.
    pub(super) async fn patch(
        &self,
        pack_name: &Arc<str>,
        key: &ObjectKey,
        object: &Value,
        live: Option<Arc<Value>>,
    ) -> Result<(), ApplyError> {
        // Absent: evaluation already reported TargetNotFound; its appearance re-evaluates.
        let Some(live) = live else {
            return Ok(());
        };
        let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.patched.insert(key.clone());
        }
        if is_subset(object, &live) {
            return Ok(());
        }
        self.clusters
            .apply_patch(pack_name, key, object, uid)
            .await?;
        self.count(|w| w.applies += 1);
        tracing::debug!(object = %key, "patched");
        Ok(())
    }

    /// Removes this pack's fields from an object it patched and no trigger patches any more:
    /// an empty apply by the pack's field manager.
    pub(super) async fn take_back_patch(
        &self,
        pack_name: &Arc<str>,
        key: &ObjectKey,
    ) -> Result<(), ApplyError> {
        let patched = self
            .lock()
            .packs
            .get(pack_name)
            .is_some_and(|p| p.patched.contains(key));
        if !patched {
            return Ok(());
        }
        if let Some(live) = self.store.get_key(key) {
            let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
            self.clusters.take_back(pack_name, key, uid).await?;
            self.count(|w| w.applies += 1);
            tracing::info!(object = %key, "patch taken back: the pack's fields removed");
        }
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.patched.remove(key);
        }
        Ok(())
    }

    /// Deletes (or orphans) the pack's outputs that no trigger desires, when that is safe:
    /// every watch synced, every trigger evaluated once since start or reload, and never an
    /// object a failing trigger may own.
    pub(super) async fn prune(&self, pack_name: &Arc<str>) -> Result<(), ReconcileError> {
        let mut doomed: Vec<(ObjectKey, Option<String>, DeletionPolicy)> = Vec::new();
        {
            let state = self.lock();
            let Some(p) = state.packs.get(pack_name) else {
                return Ok(());
            };
            if !matches!(p.initial, Initial::Done) {
                return Ok(());
            }
            let unknown: HashSet<String> = p.unknown.iter().map(ToString::to_string).collect();
            let policies: HashMap<String, DeletionPolicy> = p
                .pack
                .rule_kinds()
                .into_iter()
                .map(|r| (r.name, r.deletion))
                .collect();
            for (key, o) in p.undesired(&self.store, pack_name) {
                let owners = annotation(&o, ANNOTATION_OWNERS);
                let protected = !unknown.is_empty()
                    && owners
                        .split(',')
                        .any(|x| unknown.contains(x) || x == OWNERS_MORE);
                if protected {
                    tracing::info!(object = %key, "not pruned: a trigger that may own it fails to evaluate");
                    continue;
                }
                // The rule that made it says what happens to it; a rule that no longer
                // exists deletes.
                let orphan = annotation(&o, ANNOTATION_RULE).split(',').any(|source| {
                    let rule = source.split('/').next().unwrap_or_default();
                    policies.get(rule) == Some(&DeletionPolicy::Orphan)
                });
                let uid = o
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let policy = if orphan {
                    DeletionPolicy::Orphan
                } else {
                    DeletionPolicy::Delete
                };
                doomed.push((key, uid, policy));
            }
        }
        let mut first_error = None;
        for (key, uid, policy) in doomed {
            let result = match policy {
                DeletionPolicy::Delete => {
                    tracing::info!(object = %key, "pruning an output no trigger desires");
                    self.clusters.delete(&key, uid.as_deref()).await
                }
                DeletionPolicy::Orphan => {
                    tracing::info!(object = %key, "orphaning an output no trigger desires");
                    self.clusters.orphan(pack_name, &key).await
                }
            };
            match result {
                Ok(()) => {
                    self.count(|w| w.deletes += 1);
                    self.lock().applied.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(object = %key, error = %e, "prune failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl Store {
    fn is_metadata_only(&self, key: &ObjectKey) -> bool {
        self.cache(&KindKey {
            cluster: key.cluster.clone(),
            api_version: key.api_version.clone(),
            kind: key.kind.clone(),
        })
        .is_some_and(|c| c.metadata_only)
    }
}

fn managed_by(object: &Value, pack: &str) -> bool {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_PACK))
        .and_then(Value::as_str)
        == Some(pack)
}

/// An annotation's value, or "".
pub(super) fn annotation<'v>(object: &'v Value, name: &str) -> &'v str {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The live object already holds what would be applied: the same content was applied
/// (hash) and nobody changed the object since (generation, or resourceVersion where there is
/// none), and the ownership metadata is intact; or, when the whole object is cached, every
/// field of the desired object has the same value live.
fn up_to_date(
    desired: &Value,
    live: &Value,
    hash: u64,
    record: Option<&Applied>,
    metadata_only: bool,
) -> bool {
    let metadata_intact = ["labels", "annotations"].iter().all(|field| {
        let want = desired
            .pointer(&format!("/metadata/{field}"))
            .unwrap_or(&Value::Null);
        let have = live
            .pointer(&format!("/metadata/{field}"))
            .unwrap_or(&Value::Null);
        want.is_null() || is_subset(want, have)
    });
    if !metadata_intact {
        return false;
    }
    if let Some(record) = record
        && record.hash == hash
    {
        let generation = live.pointer("/metadata/generation").and_then(Value::as_i64);
        let unchanged = match (record.generation, generation) {
            (Some(a), Some(b)) => a == b,
            _ => {
                record.resource_version.as_deref()
                    == live
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
            }
        };
        if unchanged {
            return true;
        }
    }
    !metadata_only && is_subset(desired, live)
}

/// Every field of `want` has the same value in `have` (lists element by element); fields
/// only `have` has (defaults, other managers' fields) do not matter.
pub fn is_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, v)| {
            h.get(k).is_some_and(|hv| is_subset(v, hv)) || (v.is_null() && !h.contains_key(k))
        }),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => want == have,
    }
}

#[cfg(test)]
mod tests {
    use super::super::contributions::hash_value;
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_ignores_defaults_and_compares_lists_elementwise() {
        let want =
            json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a"}]}}}});
        let have = json!({"spec": {"replicas": 2, "progressDeadlineSeconds": 600,
                          "template": {"spec": {"containers": [{"name": "a", "imagePullPolicy": "Always"}]}}}});
        assert!(is_subset(&want, &have));
        let drifted =
            json!({"spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "a"}]}}}});
        assert!(!is_subset(&want, &drifted));
        let extra = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}});
        assert!(!is_subset(&want, &extra));
        assert!(is_subset(&json!(1.0), &json!(1)));
    }

    #[test]
    fn up_to_date_needs_unchanged_generation_and_intact_ownership() {
        let desired =
            json!({"metadata": {"labels": {"switchyard.dev/pack": "p"}}, "spec": {"x": 1}});
        let hash = hash_value(&desired);
        let record = Applied {
            hash,
            generation: Some(3),
            resource_version: Some("10".into()),
        };
        let live = json!({"metadata": {"generation": 3, "resourceVersion": "11", "labels": {"switchyard.dev/pack": "p"}}});
        assert!(up_to_date(&desired, &live, hash, Some(&record), true));
        let edited = json!({"metadata": {"generation": 4, "labels": {"switchyard.dev/pack": "p"}}});
        assert!(!up_to_date(&desired, &edited, hash, Some(&record), true));
        let relabelled = json!({"metadata": {"generation": 3, "labels": {}}});
        assert!(!up_to_date(
            &desired,
            &relabelled,
            hash,
            Some(&record),
            true
        ));
        // After a restart nothing is recorded: a full cache decides by content.
        let full = json!({"metadata": {"generation": 9, "labels": {"switchyard.dev/pack": "p"}}, "spec": {"x": 1, "y": 2}});
        assert!(up_to_date(&desired, &full, hash, None, false));
        assert!(!up_to_date(&desired, &full, hash, None, true));
    }
}
